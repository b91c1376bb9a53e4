"""Request bodies and queries (validated) and response shapes (documented in OpenAPI)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .api import Body, Page

Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^\x00-\x1f]+$")]
Label = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[^\s\x00-\x1f]+$")]
Pattern = Annotated[str, Field(min_length=1, max_length=200)]
Exec = Annotated[str, Field(min_length=1, max_length=300)]
TaskId = Annotated[int, Field(ge=1, le=10**18 - 1)]
Text = Annotated[str, Field(max_length=100_000)]
Role = Literal["admin", "member"]
TaskState = Literal["open", "in_progress", "blocked", "closed", "cancelled"]


# ---------------------------------------------------------------- bodies


class UserCreate(Body):
    name: Name
    role: Role = "member"
    allowed_execs: list[Pattern] | None = Field(None, max_length=100, description="glob patterns; null: the daemon's list")
    tool_grants: list[Name] = Field(default_factory=list, max_length=200)


class UserPatch(Body):
    role: Role | None = None
    allowed_execs: list[Pattern] | None = Field(None, max_length=100)
    tool_grants: list[Name] | None = Field(None, max_length=200)


class UserProject(Body):
    project_id: TaskId


class ProjectCreate(Body):
    name: Name
    path: Annotated[str, Field(min_length=1, max_length=4096)]


class TaskCreate(Body):
    title: Annotated[str, Field(min_length=1, max_length=500)]
    description: Text = ""
    project_id: TaskId
    priority: Annotated[int, Field(ge=0, le=4)] = 2
    parent_id: TaskId | None = None
    deps: list[TaskId] = Field(default_factory=list, max_length=100)
    labels: list[Label] = Field(default_factory=list, max_length=50)
    exec: Exec | None = None


class TaskPatch(Body):
    title: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    description: Text | None = None
    priority: Annotated[int, Field(ge=0, le=4)] | None = None
    labels: list[Label] | None = Field(None, max_length=50)
    deps: list[TaskId] | None = Field(None, max_length=100)
    exec: Exec | None = Field(None, description="null clears it (the fallback applies)")
    state: TaskState | None = None


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


class TaskQuery(Page):
    state: Literal["open", "in_progress", "blocked", "closed", "cancelled", "ready"] | None = None
    project: TaskId | None = None
    label: Label | None = None


class AuditQuery(Page):
    actor: Annotated[str, Field(max_length=200)] | None = None
    action: Annotated[str, Field(max_length=200)] | None = None


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
    allowed_execs: list[str] | None
    tool_grants: list[str]
    projects: list[int]
    created_at: str


class UserCreated(Out):
    user: UserOut
    token: str


class TokenOut(Out):
    token: str


class ProjectOut(Out):
    id: int
    name: str
    path: str
    created_at: str


class ExecResolved(Out):
    provider: str
    model: str


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
    owner_id: int | None
    attempts: int
    resume_note: str | None
    summary: str | None
    evidence: list[str]
    ready: bool
    created_at: str
    updated_at: str
    closed_at: str | None


class ProgressOut(Out):
    id: int
    task_id: int
    author: str
    text: str
    ts: str


class Deleted(Out):
    id: int
    deleted: bool


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
    version: str
    pid: int
    plugins: str = Field(description="'starting' while plugins load in the background after start-up, then 'ready'")


def list_of(model: type[BaseModel]) -> dict[str, Any]:
    """The marker for a paginated list response of ``model`` (see :mod:`elowen.daemon.openapi`)."""
    return {"list": model}
