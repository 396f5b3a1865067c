"""The ground floor: the kinds print and serialise as their words, and the engine messages
round-trip and refuse what is not theirs, naming the field."""

from __future__ import annotations

import json

import pytest

from distbench.contracts import EngineReply, EngineRequest, PlacementKind, Status, SyncKind


def test_kinds_are_their_words():
    assert f"{SyncKind.SYNC}" == "sync" and SyncKind("async") is SyncKind.ASYNC
    assert json.dumps({"k": PlacementKind.EMULATED, "s": Status.OK}) == '{"k": "emulated", "s": "ok"}'
    assert PlacementKind.LOCAL == "local"  # a record read back (a plain string) compares equal


def test_engine_messages_round_trip():
    req = EngineRequest("spark_ps-adag_w2_r0", "spark_ps:adag", 2, window=5, spawn_unix=1.5,
                        scenario='{"worker":1}')
    assert req.to_line().endswith(b"\n") and EngineRequest.from_line(req.to_line()) == req
    assert EngineRequest.from_line('{"key": "k", "strategy": "s", "workers": 2}') == EngineRequest("k", "s", 2)
    assert EngineReply.from_line(EngineReply("k", closing=True).to_line()) == EngineReply("k", True)


@pytest.mark.parametrize("line, why", [
    (b"not json", "is not JSON"),
    (b"[1]", "is not a JSON object"),
    (b'{"key": "k", "strategy": "s"}', "no 'workers'"),
    (b'{"key": 1, "strategy": "s", "workers": 2}', "key = 1 is not a string"),
    (b'{"key": "k", "strategy": "s", "workers": true}', "workers = True is not an integer"),
    (b'{"key": "k", "strategy": "s", "workers": 2, "spawn_unix": "now"}', "spawn_unix = 'now' is not a number"),
    (b'{"key": "k", "strategy": "s", "workers": 2, "extra": 1}', "unknown field(s) ['extra']"),
])
def test_a_malformed_request_is_refused_naming_the_field(line, why):
    with pytest.raises(ValueError, match=r"^EngineRequest: ") as err:
        EngineRequest.from_line(line)
    assert why in str(err.value)
    with pytest.raises(ValueError, match="closing = 'yes' is not true or false"):
        EngineReply.from_line(b'{"key": "k", "closing": "yes"}')
