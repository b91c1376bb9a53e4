"""Request bodies and queries (validated) and response shapes (documented in OpenAPI)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .api import Body, Page
from .names import check_user_name
from .passwords import MAX_LENGTH, MIN_LENGTH, control_character_error

_PROJECT_NAME = re.compile(r"^[\w.\- ]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _project_name(name: str) -> str:
    if not _PROJECT_NAME.fullmatch(name):
        raise ValueError("a project name may contain only letters, digits, '.', '_', '-' and spaces")
    if ".." in name:
        raise ValueError("a project name may not contain '..'")
    if name != name.strip():
        raise ValueError("a project name may not begin or end with a space")
    return name


def _password(text: str) -> str:
    error = control_character_error(text)
    if error is not None:
        raise ValueError(error)
    return text


def _title(text: str) -> str:
    if _CONTROL.search(text):
        raise ValueError("a task title may not contain control characters (tabs, newlines); put details in the description")
    return text


Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f]+$")]
ProjectName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=100,
        json_schema_extra={"pattern": r"^[\w.\- ]+$"},
        description="letters, digits, '.', '_', '-' and spaces; not containing '..'",
    ),
    AfterValidator(_project_name),
]
Title = Annotated[
    str,
    Field(min_length=1, max_length=500, json_schema_extra={"pattern": r"^[^\x00-\x1f\x7f]+$"}, description="no control characters (tabs, newlines)"),
    AfterValidator(_title),
]
Label = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^\s\x00-\x1f]+$")]
Pattern = Annotated[str, Field(min_length=1, max_length=200)]
Exec = Annotated[str, Field(min_length=1, max_length=300)]
TaskId = Annotated[int, Field(ge=1, le=10**18 - 1)]
Text = Annotated[str, Field(max_length=100_000)]
_NO_C0 = {"pattern": r"^[^\x00-\x1f]*$"}
Password = Annotated[
    str,
    Field(
        min_length=MIN_LENGTH,
        max_length=MAX_LENGTH,
        json_schema_extra=_NO_C0,
        description="8–1024 characters, no control characters (U+0000–U+001F); compared after NFC normalisation",
    ),
    AfterValidator(_password),
]
#: A password given to be checked (login, "current"): any length up to the maximum.
GivenPassword = Annotated[
    str,
    Field(max_length=MAX_LENGTH, json_schema_extra=_NO_C0, description="no control characters (U+0000–U+001F)"),
    AfterValidator(_password),
]
Role = Literal["admin", "member"]
TaskState = Literal["open", "in_progress", "blocked", "closed", "cancelled"]


# ---------------------------------------------------------------- bodies


def _user_name(value: str) -> str:
    return check_user_name(value)  # InvalidUserName is a ValueError: a 422 answer


UserName = Annotated[
    str,
    Field(
        min_length=1, max_length=100, description="no white space at either end, no control or format characters, NFKC, one script (see elowen.daemon.names)"
    ),
    AfterValidator(_user_name),
]


class UserCreate(Body):
    name: UserName
    role: Role = "member"
    allowed_execs: list[Pattern] | None = Field(None, max_length=100, description="glob patterns; null: the daemon's list")
    tool_grants: list[Name] = Field(default_factory=list, max_length=200)


class UserPatch(Body):
    role: Role | None = None
    allowed_execs: list[Pattern] | None = Field(None, max_length=100)
    tool_grants: list[Name] | None = Field(None, max_length=200)


class PasswordSet(Body):
    password: Password
    current: GivenPassword | None = Field(None, description="your current password: required when you change your own and one is set")


class PasswordRemove(Body):
    current: GivenPassword | None = Field(None, description="your current password: required when you remove your own")


class PasswordCheck(Body):
    current: GivenPassword = Field(description="your current password")


class Login(Body):
    name: Name
    password: Annotated[GivenPassword, Field(min_length=1)]


class UserProject(Body):
    project_id: TaskId


class ProjectCreate(Body):
    name: ProjectName
    path: Annotated[str, Field(min_length=1, max_length=4096)]


class TaskCreate(Body):
    title: Title
    description: Text = ""
    project_id: TaskId
    priority: Annotated[int, Field(ge=0, le=4)] = 2
    parent_id: TaskId | None = None
    deps: list[TaskId] = Field(default_factory=list, max_length=100)
    labels: list[Label] = Field(default_factory=list, max_length=50)
    exec: Exec | None = None
    start: bool = Field(True, description="false: the task is created blocked (with a note saying so), so no agent starts until it is reopened")


class TaskPatch(Body):
    title: Title | None = None
    description: Text | None = None
    priority: Annotated[int, Field(ge=0, le=4)] | None = None
    labels: list[Label] | None = Field(None, max_length=50)
    deps: list[TaskId] | None = Field(None, max_length=100)
    exec: Exec | None = Field(None, description="null clears it (the fallback applies)")
    state: TaskState | None = None
    resume_note: Text | None = Field(None, description="the note the next agent of this task reads (a reopen's instructions); null clears it")


class TaskClose(Body):
    summary: Annotated[str, Field(min_length=1, max_length=100_000)]
    evidence: list[Annotated[str, Field(max_length=10_000)]] = Field(default_factory=list, max_length=100)


class TaskProgress(Body):
    text: Annotated[str, Field(min_length=1, max_length=100_000)]


class PluginConfig(Body):
    values: dict[Annotated[str, Field(min_length=1, max_length=100)], Any] = Field(max_length=100)


class PluginGrant(Body):
    capability: Annotated[str, Field(min_length=1, max_length=200)]


# ---------------------------------------------------------------- queries


class TaskFilter(BaseModel):
    """Filters shared by ``GET /tasks`` and ``GET /tasks/counts`` (all optional, combined with AND)."""

    model_config = ConfigDict(extra="ignore")

    project: TaskId | None = None
    label: Label | None = None
    priority: Annotated[int, Field(ge=0, le=4)] | None = None
    owner: TaskId | None = Field(None, description="the owner's user id")
    mission: TaskId | None = Field(None, description="tasks labelled mission:<id>")
    q: Annotated[str, Field(min_length=1, max_length=200, description="text in the title or description (case-insensitive)")] | None = None


class TaskQuery(TaskFilter, Page):
    state: Literal["open", "in_progress", "blocked", "closed", "cancelled", "ready"] | None = None
    order: Literal["asc", "desc"] = Field("asc", description="by id: asc (oldest first) or desc (newest first)")


class ProjectDeleteQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    force: bool = Field(False, description="also delete open, in-progress and blocked tasks")


class AuditQuery(Page):
    """``GET /audit`` filters (exact matches); any other query parameter is refused (422)."""

    actor: Annotated[str, Field(max_length=200, description="e.g. user:1, kernel, or a plugin's name")] | None = None
    action: Annotated[str, Field(max_length=200, description="e.g. plugin.enable, command")] | None = None
    outcome: Annotated[str, Field(max_length=200, description="e.g. ok, denied, error, invalid")] | None = None


class EventsQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    types: Annotated[str, Field(max_length=2000, description="comma-separated types; 'task.*' prefixes")] | None = None
    project: TaskId | None = None
    last_event_id: Annotated[int, Field(ge=0, le=10**18 - 1)] | None = None


# ---------------------------------------------------------------- responses (documentation)


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class UserOut(Out):
    id: int
    name: str
    role: Role
    kind: Literal["person", "overseer"] = Field("person", description="overseer: a mission's parked overseer CLI")
    mission_id: int | None = Field(None, description="the mission an overseer principal is bound to")
    allowed_execs: list[str] | None
    tool_grants: list[str]
    projects: list[int]
    created_at: str
    has_password: bool = Field(description="whether the user may log in with name and password")


class UserCreated(Out):
    user: UserOut
    token: str


class TokenOut(Out):
    token: str


class PasswordState(Out):
    id: int
    has_password: bool
    login_tokens_revoked: int = Field(
        description="the user's login tokens (from POST /auth/login) revoked by this change; when you change your "
        "own password, the token making the request is kept"
    )


class PasswordChecked(Out):
    id: int
    ok: Literal[True]


class LoginOut(Out):
    token: str = Field(description="a new full token for the user (shown once); revoke it with POST /auth/logout")
    user: UserOut


class LoggedOut(Out):
    revoked: bool


class ProjectOut(Out):
    id: int
    name: str
    path: str
    created_at: str


class ExecResolved(Out):
    provider: str
    model: str


class ExecProblem(Out):
    code: str = Field(description="invalid_exec, unknown_executor, executor_unavailable or executors_unavailable")
    message: str = Field(description="why the spec does not resolve now (e.g. its provider plugin is disabled); the task waits")


class TaskOut(Out):
    id: int
    title: str
    description: str
    project_id: int
    state: TaskState
    priority: int
    parent_id: int | None
    deps: list[int]
    labels: list[str]
    exec: str | None
    exec_resolved: ExecResolved | None
    exec_error: ExecProblem | None = None
    owner_id: int | None
    attempts: int
    resume_note: str | None
    summary: str | None
    evidence: list[str]
    ready: bool
    created_at: str
    updated_at: str
    closed_at: str | None


class TaskCounts(Out):
    """``GET /tasks/counts``: tasks per state (every state, 0 included) and their sum."""

    counts: dict[str, int]
    total: int


class ProgressOut(Out):
    id: int
    task_id: int
    author: str
    text: str
    ts: str


class Deleted(Out):
    id: int
    deleted: bool


class ProjectDeleted(Out):
    id: int
    deleted: bool
    tasks_deleted: int


class UserDeleted(Out):
    id: int
    deleted: bool
    tokens_revoked: int


class TokensRevoked(Out):
    user_id: int
    revoked: int


class PluginOut(Out):
    name: str
    version: str
    state: str
    source: str
    error: str | None


class AuditOut(Out):
    id: int
    ts: str
    actor: str
    action: str
    target: str
    outcome: str
    detail: dict[str, Any]


class Health(Out):
    status: str
    service: Literal["daemon"] = Field(description="what answers: always 'daemon' for the Elowen daemon")
    version: str
    pid: int
    home: str = Field(description="a short hash identifying the daemon's ELOWEN_HOME (never the path)")
    plugins: str = Field(description="'starting' while plugins load in the background after start-up, then 'ready'")


def list_of(model: type[BaseModel]) -> dict[str, Any]:
    """The marker for a paginated list response of ``model`` (see :mod:`elowen.daemon.openapi`)."""
    return {"list": model}
