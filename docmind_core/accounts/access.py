"""Who may read and manage which knowledge base, conversation, trace and memory.

One guard for every entry point (UI, CLI, one-shot workers, the agentic
tools, MCP): callers pass the user from their *authenticated* context (the
Streamlit session, the API key, ``LOCAL_USER`` in single-user mode), never an
id the caller typed.

Knowledge bases:
- private: the owner only;
- department: the owner and everyone in the KB's department (the owner's
  department when the KB has none recorded); a KB with no department at all is
  effectively private;
- public: everyone signed in;
- admins read and manage everything; the owner manages (delete, visibility).
A KB without an owner (created before sign-in was switched on) is treated as
owned by nobody: only admins reach it while it is private.

Refusals name the KBs by id, not by name: the name of a KB someone may not
read is itself something they may not read.  Unknown ids are refused with the
same words as unreadable ones, so probing ids reveals nothing.
"""

from __future__ import annotations

from typing import Iterable, Protocol, Sequence

from docmind_core.accounts.ids import is_record_id
from docmind_core.errors import AccessDenied, NotFound, SignInRequired
from docmind_core.values import KnowledgeBase, Visibility
from docmind_core.accounts.users import User, UserStore

VISIBILITIES: tuple[str, ...] = ("private", "department", "public")


class KnowledgeBaseSource(Protocol):
    """The part of ``KnowledgeStore`` the guard needs."""

    def get_kb(self, kb_id: int) -> KnowledgeBase: ...

    def list_kbs(self) -> list[KnowledgeBase]: ...

    def update_kb(self, kb_id: int, **fields) -> object: ...


class KbAccessGuard:
    """Applies the knowledge-base rules above; stateless apart from its stores."""

    def __init__(self, store: KnowledgeBaseSource, users: UserStore | None = None):
        self.store = store
        self.users = users

    # -- single KB predicates ---------------------------------------------
    def can_read(self, user: User, kb: KnowledgeBase) -> bool:
        if not user.is_signed_in:
            return False
        if user.is_admin or _owns(user, kb):
            return True
        if kb.visibility == "public":
            return True
        if kb.visibility == "department":
            department = self._department_of(kb)
            return bool(department) and department == user.department
        return False

    def can_manage(self, user: User, kb: KnowledgeBase) -> bool:
        """Delete the KB, change its visibility, add or remove documents: owner or admin."""
        return user.is_signed_in and (user.is_admin or _owns(user, kb))

    def is_default_for(self, user: User, kb: KnowledgeBase) -> bool:
        """Selected for ``user`` before they choose: what they would read without an admin's reach (their
        own, public, their department's), plus KBs owned by nobody (made by the operator)."""
        if not kb.owner_id or _owns(user, kb) or kb.visibility == "public":
            return True
        if kb.visibility == "department":
            department = self._department_of(kb)
            return bool(department) and department == user.department
        return False

    # -- many KBs ----------------------------------------------------------
    def readable_kbs(self, user: User) -> list[KnowledgeBase]:
        return [kb for kb in self.store.list_kbs() if self.can_read(user, kb)]

    def filter_readable(self, user: User, kb_ids: Iterable[int]) -> tuple[list[int], list[int]]:
        """Split ids into (readable, refused), keeping order and dropping repeats; unknown ids are refused."""
        allowed: list[int] = []
        denied: list[int] = []
        for kb_id in dict.fromkeys(int(i) for i in kb_ids):
            kb = self._lookup(kb_id)
            (allowed if kb is not None and self.can_read(user, kb) else denied).append(kb_id)
        return allowed, denied

    def require_readable(self, user: User, kb_ids: Iterable[int]) -> list[int]:
        """The ids when every one is readable; otherwise AccessDenied naming the refused ones."""
        allowed, denied = self.filter_readable(user, kb_ids)
        if denied:
            raise AccessDenied(denied_message(user, denied))
        return allowed

    def resolve_scope(self, user: User, kb_ids: Sequence[int] | None) -> list[int]:
        """The KBs one request searches: the ones asked for (all must be readable), or every readable KB."""
        if kb_ids:
            return self.require_readable(user, kb_ids)
        return [kb.id for kb in self.readable_kbs(user)]

    # -- managing ----------------------------------------------------------
    def require_manage(self, user: User, kb_id: int) -> KnowledgeBase:
        """The KB when the user may delete or reconfigure it; AccessDenied otherwise."""
        kb = self._lookup(kb_id)
        if kb is None or not self.can_read(user, kb):
            raise AccessDenied(denied_message(user, [kb_id]))
        if not self.can_manage(user, kb):
            raise AccessDenied(f"only the owner of knowledge base #{kb.id} or an admin may change it (delete it, "
                               "add or remove documents, re-index it or change its sharing)")
        return kb

    def set_visibility(self, user: User, kb_id: int, visibility: Visibility) -> KnowledgeBase:
        if visibility not in VISIBILITIES:
            raise ValueError(f"visibility must be one of {VISIBILITIES}, got {visibility!r}")
        kb = self.require_manage(user, kb_id)
        fields: dict[str, object] = {"visibility": visibility}
        if visibility == "department" and not kb.department:
            # Record the department at the moment of sharing, so a later move of
            # the owner does not silently widen or narrow who can read.
            fields["department"] = self._department_of(kb)
        self.store.update_kb(kb_id, **fields)
        return self.store.get_kb(kb_id)

    # -- helpers -----------------------------------------------------------
    def _lookup(self, kb_id: int) -> KnowledgeBase | None:
        if not is_record_id(kb_id):  # no KB has it (a huge one would crash the query): unknown, refused alike
            return None
        try:
            return self.store.get_kb(kb_id)
        except NotFound:
            return None

    def _department_of(self, kb: KnowledgeBase) -> str:
        if kb.department:
            return kb.department
        if self.users is None or not kb.owner_id:
            return ""
        try:
            return self.users.get(kb.owner_id).department
        except NotFound:
            return ""


def require_signed_in(user: User) -> User:
    """``user``; a signed-out visitor is refused everything."""
    if not user.is_signed_in:
        raise SignInRequired("sign in first: this DocMind requires it")
    return user


def denied_message(user: User, kb_ids: Sequence[int]) -> str:
    ids = ", ".join(f"#{i}" for i in kb_ids)
    noun = "knowledge base" if len(kb_ids) == 1 else "knowledge bases"
    return (f"{user.username} may not read {noun} {ids} (or it does not exist); "
            "ask its owner to share it or choose another knowledge base")


def name_unavailable_message(user: User, name: str) -> str:
    """One refusal for every KB name a user may not create or add to: one a KB they may not change holds (whether
    or not they may read it), or one that looks like the name of a KB they may not read.  It never says that a KB
    holds the name: ``kb show`` answers an unreadable name "it does not exist, or ... may not read it", and this
    must not contradict it (issue 40 item 6).  Names stay unique across users, so that a refusal happens at all
    still tells a name is in use; namespacing names per owner would need a schema change (see the report)."""
    return (f"{user.username} may not use the knowledge base name '{name.strip()}': it is not available to "
            f"{user.username}; choose another name (docmind kb list shows the knowledge bases "
            f"{user.username} may read)")


def look_alike_message(name: str, existing: KnowledgeBase) -> str:
    """A new KB name refused beside a KB the user may read whose name looks the same."""
    return (f"the knowledge base name '{name.strip()}' looks like the name of the knowledge base '{existing.name}' "
            f"(#{existing.id}): only the case, invisible characters or letters from another script differ; use "
            "that knowledge base, or choose a name that reads differently")


def _owns(user: User, kb: KnowledgeBase) -> bool:
    return kb.owner_id is not None and kb.owner_id != 0 and kb.owner_id == user.id


# --------------------------------------------------------------------------
# Conversations, traces, memories: personal objects
# --------------------------------------------------------------------------


def can_read_conversation(user: User, owner_id: int | None) -> bool:
    """Conversations are private to their owner; not even admins read them."""
    return _same_person(user, owner_id)


def can_read_trace(user: User, owner_id: int | None) -> bool:
    """Traces: the owner, and admins (who debug runs)."""
    return user.is_signed_in and (user.is_admin or _same_person(user, owner_id))


# Memories need no predicate: the memory store only ever reads and deletes rows of the user it is given,
# and every caller (the facade, the tools) gives it the acting user, never an id from the request.


def _same_person(user: User, owner_id: int | None) -> bool:
    # Rows written in single-user mode carry user id 0 (LOCAL_USER) or NULL;
    # they belong to the local user only.
    return user.is_signed_in and (owner_id or 0) == user.id
