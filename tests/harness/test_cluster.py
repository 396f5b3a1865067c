"""Entry points for users' own launchers: the join timeout of 'worker tf'."""

from __future__ import annotations

import pytest

from distbench.config import ConfigError
from distbench.harness.cluster import DEFAULT_JOIN_TIMEOUT_S, join_timeout


def test_join_timeout_flag_then_env_then_default():
    assert DEFAULT_JOIN_TIMEOUT_S == 120.0
    assert join_timeout(None, {}) == 120.0
    assert join_timeout(None, {"DISTBENCH_JOIN_TIMEOUT_S": ""}) == 120.0
    assert join_timeout(None, {"DISTBENCH_JOIN_TIMEOUT_S": "450"}) == 450.0
    assert join_timeout(5.0, {"DISTBENCH_JOIN_TIMEOUT_S": "450"}) == 5.0


@pytest.mark.parametrize("flag,env,message", [
    (0.0, {}, "--join-timeout 0.0: expected a number of seconds > 0, e.g. 120"),
    (float("inf"), {}, "--join-timeout inf: expected a number of seconds > 0, e.g. 120"),
    (None, {"DISTBENCH_JOIN_TIMEOUT_S": "soon"}, "DISTBENCH_JOIN_TIMEOUT_S 'soon': expected a number of seconds > 0, "
                                                 "e.g. 120"),
    (None, {"DISTBENCH_JOIN_TIMEOUT_S": "-3"}, "DISTBENCH_JOIN_TIMEOUT_S '-3': expected a number of seconds > 0, "
                                               "e.g. 120"),
])
def test_bad_join_timeouts_are_refused(flag, env, message):
    with pytest.raises(ConfigError) as e:
        join_timeout(flag, env)
    assert str(e.value) == message
