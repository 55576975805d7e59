"""The exception tree: catch `ParleyError` for everything parley raises.

A usage mistake (`UserError`: wrong arguments, bad configuration, a missing extra) is kept
apart from a runtime failure (a model, a tool or the service failing while things were used
correctly), so callers can fix the first and retry or report the second::

    ParleyError
    ├── UserError                      the caller did something wrong; fix the call
    │   ├── MessageError               a message breaks a role or content rule (also ValueError)
    │   ├── ConfigurationError         bad settings, names taken or unknown (also ValueError)
    │   └── MissingDependencyError     an optional extra is not installed (carries the hint)
    ├── ModelError                     a model call failed at run time
    │   ├── ModelHTTPError             an error status (status, body, retry_after)
    │   │   └── RateLimitError         429 / quota
    │   ├── ContextLengthError         the prompt does not fit the model's context window
    │   ├── ContentFilterError         the provider refused or cut the output for its content
    │   ├── ModelTimeoutError          no answer in time
    │   ├── ModelConnectionError       the connection failed or dropped
    │   └── ModelOutputError           the model answered, but not in a form that can be used
    ├── RetrievalError                 a document or a retrieval index failed (`parley.rag`)
    │   ├── DocumentError              a document could not be read or indexed (its source)
    │   └── IndexMismatchError         another embedding model's vectors (also a UserError)
    ├── ToolError                      a tool could not be found, called or finished
    │   ├── ToolNotFoundError
    │   ├── ToolArgumentsError         arguments that cannot be parsed or do not fit the schema
    │   └── ToolExecutionError         the tool itself raised
    └── ServiceError                   the HTTP service refused or failed a request (status)
        ├── NotFoundError              404: unknown agent, thread or run
        ├── ConflictError              409: the thread is busy with another run
        ├── AuthenticationError        401 / 403
        ├── InvalidRequestError        422: fields the service rejected (also a UserError)
        ├── RunFailedError             a run failed on the service (a stream's error frame)
        └── ServiceConnectionError     the service could not be reached, or did not answer

Pydantic's `ValidationError` is raised (not wrapped) where a pydantic model rejects input;
the rules parley adds to its models raise `MessageError`, which pydantic reports inside that
`ValidationError` with parley's text.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationError",
    "ConfigurationError",
    "ConflictError",
    "ContentFilterError",
    "ContextLengthError",
    "DocumentError",
    "IndexMismatchError",
    "InvalidRequestError",
    "MessageError",
    "MissingDependencyError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelOutputError",
    "ModelTimeoutError",
    "NotFoundError",
    "ParleyError",
    "RateLimitError",
    "RetrievalError",
    "RunFailedError",
    "ServiceConnectionError",
    "ServiceError",
    "ToolArgumentsError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "UserError",
]


class ParleyError(Exception):
    """The root of every error parley raises on purpose."""


class UserError(ParleyError):
    """A usage mistake: the arguments or the configuration are wrong, not the world."""


class MessageError(UserError, ValueError):
    """A message or content block breaks a rule (roles, blocks, sources).

    It is also a `ValueError` so that pydantic reports it inside a `ValidationError` when it is
    raised by a validator.
    """


class ConfigurationError(UserError, ValueError):
    """Settings are missing, unknown or in conflict (also a `ValueError`, as Qwen-Agent raises)."""


class MissingDependencyError(UserError, ImportError):
    """An optional dependency is not installed.

    Args:
        package: The import name that failed.
        extra: The parley extra that installs it.
    """

    def __init__(self, package: str, extra: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{package!r} is not installed; install it with `pip install 'parley[{extra}]'`"
        )


class ModelError(ParleyError):
    """A model call failed at run time.

    Args:
        message: What went wrong.
        model: The model's name, when known.
        provider: The provider's name, when known.
    """

    def __init__(
        self, message: str, *, model: str | None = None, provider: str | None = None
    ) -> None:
        self.model = model
        self.provider = provider
        super().__init__(message)


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status.

    Args:
        status_code: The HTTP status.
        body: The response body, parsed JSON when it was JSON.
        message: What went wrong; defaults to the status and body.
        retry_after: Seconds the provider asked to wait (its `Retry-After`), when it said.
        model: The model's name, when known.
        provider: The provider's name, when known.
    """

    def __init__(
        self,
        status_code: int,
        body: Any = None,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        model: str | None = None,
        provider: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.body = body
        self.retry_after = retry_after
        super().__init__(
            message or f"status {status_code}: {body!r}", model=model, provider=provider
        )


class RateLimitError(ModelHTTPError):
    """The provider is rate limiting (HTTP 429) or the quota is spent."""


class ContextLengthError(ModelError):
    """The prompt and the requested output do not fit the model's context window."""


class ContentFilterError(ModelError):
    """The provider refused the request or cut the output because of its content."""


class ModelTimeoutError(ModelError):
    """The model did not answer in time."""


class ModelConnectionError(ModelError):
    """The connection to the model failed or dropped."""


class ModelOutputError(ModelError):
    """The model answered, but in a form parley cannot use (bad JSON, unknown tool, ...)."""


class RetrievalError(ParleyError):
    """A document could not be indexed, or a retrieval index could not be used."""


class DocumentError(RetrievalError):
    """A document could not be read, parsed or indexed; nothing else in the index changed.

    Args:
        message: What went wrong, naming the document.
        source: The path or URL the document was given as.
    """

    def __init__(self, message: str, *, source: str) -> None:
        self.source = source
        super().__init__(message)


class IndexMismatchError(RetrievalError, UserError):
    """The index was built with another embedding model or vector size than the one given.

    Vectors of two models are not comparable: an index keeps one model's. Open it with that
    model, or build a new index.
    """


class ToolError(ParleyError):
    """A tool could not be found, called or finished.

    Args:
        message: What went wrong.
        tool_name: The tool's name.
    """

    def __init__(self, message: str, *, tool_name: str | None = None) -> None:
        self.tool_name = tool_name
        super().__init__(message)


class ToolNotFoundError(ToolError):
    """No tool of that name is available."""


class ToolArgumentsError(ToolError, ValueError):
    """The arguments cannot be parsed or do not fit the tool's schema (also a `ValueError`)."""


class ToolExecutionError(ToolError):
    """The tool raised while running."""


class ServiceError(ParleyError):
    """The HTTP service refused or failed a request.

    Args:
        message: What went wrong.
        status_code: The HTTP status the service answered with.
    """

    def __init__(self, message: str, *, status_code: int = 500) -> None:
        self.status_code = status_code
        super().__init__(message)


class NotFoundError(ServiceError):
    """An unknown agent, thread or run (404)."""


class ConflictError(ServiceError):
    """The thread is busy with another run (409)."""


class AuthenticationError(ServiceError):
    """Missing or wrong credentials (401), or a resource of another user (403)."""


class InvalidRequestError(ServiceError, UserError):
    """The service rejected the request's fields (422); also a `UserError`: fix the call.

    Args:
        message: What was rejected, field by field.
        errors: The service's validation errors (`{"loc", "msg", "type"}` each), when it sent
            them.
        status_code: The HTTP status (422).
    """

    def __init__(
        self, message: str, *, errors: list[Any] | None = None, status_code: int = 422
    ) -> None:
        self.errors = errors or []
        super().__init__(message, status_code=status_code)


class RunFailedError(ServiceError):
    """A run failed on the service: the `error` frame of a stream.

    Args:
        message: The service's message.
        thread_id: The run's thread, when known.
        run_id: The run, when known.
    """

    def __init__(
        self, message: str, *, thread_id: str | None = None, run_id: str | None = None
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        super().__init__(message, status_code=500)


class ServiceConnectionError(ServiceError):
    """The service could not be reached, dropped the connection or did not answer in time.

    No HTTP status came back; `status_code` is 503, as a gateway would report it.
    """

    def __init__(self, message: str, *, status_code: int = 503) -> None:
        super().__init__(message, status_code=status_code)
