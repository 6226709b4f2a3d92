"""The error tree: every error crosses a process boundary (pickle, as Ray sends it) whole."""

import pickle

import pytest

from llm_anchors import (
    BackendError,
    BackendTimeoutError,
    BadResponseError,
    BudgetExceeded,
    ClassifierError,
    ConfigError,
    InvalidInputError,
    RateLimitError,
)

ERRORS = [
    InvalidInputError("text to explain is empty"),
    ConfigError("bad"),
    BudgetExceeded("sending 3 more queries could pass the cap"),
    ClassifierError("returned 2 labels for 3 texts", classifier="function:m"),
    BackendError("HTTP 401: wrong key", classifier="openai-compat:m:chat", status=401),
    RateLimitError("HTTP 429: slow down", classifier="openai-compat:m:chat", retry_after=1.5),
    BackendTimeoutError("no answer in time", classifier="openai-compat:m:chat"),
    BadResponseError("answer is not JSON", classifier="openai-compat:m:chat", status=200, transient=True),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_unpickles_as_itself(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert vars(again) == vars(error)
    if isinstance(error, BackendError):
        assert again.retryable == error.retryable
