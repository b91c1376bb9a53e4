"""The typed service contracts of Elowen's builtin services, one module per domain.

A consumer writes ``ctx.service(TmuxService)``; see :mod:`elowen_sdk.contracts` for how a
contract is declared and checked. Each module here holds the protocols of one domain and the
plain data types they exchange.
"""

from .agents import AgentsService as AgentsService
from .agents import DecideError as DecideError
from .agents import DecisionsService as DecisionsService
from .agents import DeriverService as DeriverService
from .brain import BrainService as BrainService
from .executors import ExecutorsService as ExecutorsService
from .executors import ResolvedExec as ResolvedExec
from .git import GitError as GitError
from .git import GitService as GitService
from .git import MergeConflict as MergeConflict
from .git import Workdir as Workdir
from .inference import ChatStream as ChatStream
from .inference import InferenceService as InferenceService
from .memory import InvalidMemory as InvalidMemory
from .memory import Memory as Memory
from .memory import MemoryNotFound as MemoryNotFound
from .memory import MemoryService as MemoryService
from .missions import DecisionPath as DecisionPath
from .missions import DecisionRequest as DecisionRequest
from .missions import MissionsService as MissionsService
from .missions import Proposal as Proposal
from .notify import Notification as Notification
from .notify import NotificationAction as NotificationAction
from .notify import NotifyService as NotifyService
from .notify import NotifySurface as NotifySurface
from .tasks import TasksService as TasksService
from .tmux import OutputEvent as OutputEvent
from .tmux import OutputStream as OutputStream
from .tmux import PaneInfo as PaneInfo
from .tmux import SendResult as SendResult
from .tmux import Spawned as Spawned
from .tmux import TmuxService as TmuxService
from .user_tools import UserToolsService as UserToolsService
from .users import UsersService as UsersService
