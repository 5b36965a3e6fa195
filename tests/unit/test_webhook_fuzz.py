"""No body takes the Agones webhook to a 5xx: hostile bodies through the HTTP app, in memory.

Every answer is either the review response for REVIEW's Fleet (7 replicas, the request's uid) or a
4xx ``{"reason", "message"}`` of a few hundred bytes (``assert_documented_answer``). The number of
examples comes from the hypothesis profile (``PRESAGE_FUZZ_PROFILE=fuzz-long`` for a long run);
tests/integration/test_webhook_fuzz_wire.py sends a share of them over a real socket.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presage_scaler.serving.agones import MAX_BODY_BYTES, MAX_NAME_CHARS, PATH
from tests.harness.agones import FULL, REVIEW, assert_documented_answer, webhook_in_memory
from tests.harness.hostile_json import bodies, json_values

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


async def post(body: bytes | AsyncIterator[bytes], headers: dict[str, Any] | None = None) -> tuple[int, bytes]:
    async with webhook_in_memory() as client:
        response = await client.post(PATH, content=body, headers=headers)
    return response.status_code, response.content


@FUZZ
@given(bodies([REVIEW, FULL]))
async def test_any_body_gets_a_documented_answer(body: bytes) -> None:
    assert_documented_answer(body, *await post(body))


@FUZZ
@given(
    uid=st.text(min_size=1, max_size=MAX_NAME_CHARS),
    extra=st.dictionaries(st.text(max_size=10).filter(lambda k: k not in FULL["request"]), json_values(), max_size=3),
    base=st.sampled_from([REVIEW, FULL]),
)
async def test_a_valid_review_is_answered_with_its_uid(uid: str, extra: dict[str, Any], base: dict[str, Any]) -> None:
    # Newer Agones versions add fields presage does not know (whatever they hold, lone surrogates
    # included); any uid is echoed. The fields it does know (FULL's, labels among them) are checked.
    review = copy.deepcopy(base)
    review["request"].update(extra, uid=uid)
    body = json.dumps(review).encode()
    status, content = await post(body)
    assert status == 200, content
    assert_documented_answer(body, status, content)


@FUZZ
@given(st.one_of(st.binary(max_size=30), st.integers(min_value=0).map(lambda n: str(n).encode())))
async def test_any_content_length_gets_a_documented_answer(declared: bytes) -> None:
    body = json.dumps(REVIEW).encode()
    status, content = await post(body, {"content-length": declared})
    assert_documented_answer(body, status, content)
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        assert status == 413


@FUZZ
@given(
    size=st.integers(min_value=MAX_BODY_BYTES - 100, max_value=MAX_BODY_BYTES + 100),
    cuts=st.lists(st.integers(min_value=0, max_value=MAX_BODY_BYTES + 100), max_size=20),
)
async def test_the_limit_holds_however_the_body_is_chunked(size: int, cuts: list[int]) -> None:
    review = json.dumps(REVIEW).encode()
    body = review + b" " * (size - len(review))
    bounds = sorted({0, size, *(cut for cut in cuts if cut < size)})

    async def chunks() -> AsyncIterator[bytes]:
        for start, end in itertools.pairwise(bounds):
            yield body[start:end]

    status, content = await post(chunks())
    assert status == (200 if size <= MAX_BODY_BYTES else 413), content
    assert_documented_answer(body, status, content)


async def test_known_fields_of_the_wrong_type_are_refused_by_name() -> None:
    for key, value in (("labels", []), ("annotations", {"a": 1}), ("labels", "app=arena")):
        review = copy.deepcopy(REVIEW)
        review["request"][key] = value
        status, content = await post(json.dumps(review).encode())
        assert status == 400, (key, value)
        assert f"request.{key} must be an object of strings".encode() in content
