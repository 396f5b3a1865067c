"""Protocol round trips and every kind of malformed frame."""
import struct

import numpy as np
import pytest

from distbench.ps_async import protocol as P

TEMPLATE = P.template_from([((3, 2), np.float32), ((4,), np.float32)])


def good_tensors():
    return [np.arange(6, dtype=np.float32).reshape(3, 2), np.array([1, -2, 3, 0.5], np.float32)]


def commit_frames(tensors=None, **kw):
    msg = P.Message(P.MsgType.COMMIT, worker_id=3, seq=17, clock=9, aux=2, req_id=44,
                    token=b"t" * 16, tensors=good_tensors() if tensors is None else tensors, **kw)
    return [bytes(memoryview(f).cast("B")) if isinstance(f, np.ndarray) else f
            for f in P.encode(msg)]


def test_round_trip_keeps_header_and_tensors():
    frames = commit_frames(flags=P.FLAG_PULL)
    msg = P.decode(frames, TEMPLATE, max_bytes=P.default_max_bytes(TEMPLATE), require_finite=True)
    assert (msg.type, msg.worker_id, msg.seq, msg.clock, msg.aux, msg.req_id, msg.flags,
            msg.token) == (P.MsgType.COMMIT, 3, 17, 9, 2, 44, P.FLAG_PULL, b"t" * 16)
    for got, want in zip(msg.tensors, good_tensors()):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == want.shape


def test_encode_is_zero_copy_for_contiguous_arrays():
    t = good_tensors()
    frames = P.encode(P.Message(P.MsgType.SYNC, tensors=t))
    assert frames[1] is t[0] and frames[2] is t[1]


def test_round_trip_various_dtypes_and_single_buffer():
    tensors = [np.arange(5, dtype=np.int64), np.zeros((2, 0, 3), np.float64),
               np.array(3.5, np.float16), np.frombuffer(b"xyz", np.uint8)]
    buf = P.join_frames(P.encode(P.Message(P.MsgType.PULL_REPLY, clock=5, tensors=tensors)))
    frames = P.split_frames(buf)
    msg = P.decode(frames, P.template_from(tensors))
    assert msg.clock == 5
    for got, want in zip(msg.tensors, tensors):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype and got.shape == want.shape


def test_mapping_template_per_message_type():
    frames = P.encode(P.Message(P.MsgType.PULL))
    assert P.decode(frames, {P.MsgType.COMMIT: TEMPLATE}).tensors == []
    with pytest.raises(P.ProtocolError) as e:  # PULL must carry no tensors
        P.decode(commit_frames()[:1] + commit_frames()[1:], {P.MsgType.PULL: []})
    assert e.value.kind == "count"


def expect_error(frames, kind, *fragments, **kw):
    kw.setdefault("max_bytes", P.default_max_bytes(TEMPLATE))
    with pytest.raises(P.ProtocolError) as e:
        P.decode(frames, TEMPLATE, require_finite=True, **kw)
    assert e.value.kind == kind, str(e.value)
    for frag in fragments:
        assert frag in str(e.value), str(e.value)
    return e.value


def test_truncated_header():
    f = commit_frames()
    expect_error([f[0][:30]] + f[1:], "truncated", "30 bytes", "60")


def test_header_descriptor_truncated():
    f = commit_frames()
    expect_error([f[0][:-4]] + f[1:], "truncated", "shape of tensor 1")


def test_header_with_trailing_bytes():
    f = commit_frames()
    expect_error([f[0] + b"\0\0"] + f[1:], "size", "descriptors")


def test_bad_magic_version_type():
    f = commit_frames()
    expect_error([b"XXXX" + f[0][4:]] + f[1:], "magic", "b'XXXX'", "DBPS")
    expect_error([f[0][:4] + bytes([9]) + f[0][5:]] + f[1:], "version", "9", "expected 1")
    expect_error([f[0][:5] + bytes([200]) + f[0][6:]] + f[1:], "type", "200")


def test_truncated_tensor_frame():
    f = commit_frames()
    expect_error(f[:1] + [f[1][:-4]] + f[2:], "truncated", "tensor 0", "20 bytes", "expected 24")


def test_tensor_frame_too_long():
    f = commit_frames()
    expect_error(f[:2] + [f[2] + b"\0" * 4], "size", "tensor 1", "20 bytes", "expected 16")


def test_wrong_shape():
    t = good_tensors()
    t[0] = t[0].reshape(2, 3)
    expect_error(commit_frames(t), "shape", "(2, 3)", "expected (3, 2)")


def test_wrong_dtype():
    t = good_tensors()
    t[1] = t[1].astype(np.float64)
    expect_error(commit_frames(t), "dtype", "float64", "expected float32")


def test_unknown_dtype_code():
    f = commit_frames()
    h = bytearray(f[0])
    h[P.FIXED_HEADER_BYTES] = 99
    expect_error([bytes(h)] + f[1:], "dtype", "code 99")


def test_wrong_tensor_count():
    expect_error(commit_frames(good_tensors()[:1]), "count", "received 1", "expected 2")
    expect_error(commit_frames()[:2], "count", "announces 2", "1 tensor frames")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite(bad):
    t = good_tensors()
    t[1][2] = bad
    expect_error(commit_frames(t), "nonfinite", "tensor 1", "finite")
    # accepted when finiteness is not required (e.g. replies)
    P.decode(commit_frames(t), TEMPLATE)


def test_oversized_message():
    f = commit_frames()
    limit = sum(len(x) for x in f) - 1
    expect_error(f, "size", "exceeds", str(limit), max_bytes=limit)
    expect_error(f + [b"\0" * 10_000], "size", max_bytes=1000)


def test_too_many_tensors_announced():
    f = commit_frames()
    h = bytearray(f[0])
    struct.pack_into("<I", h, 12, P.MAX_TENSORS + 1)
    expect_error([bytes(h)] + f[1:], "count", str(P.MAX_TENSORS))


def test_all_finite_fast_path_is_exact():
    big = np.full(10, 3e38, np.float32)  # finite, but the float32 sum overflows
    assert P.all_finite(big)
    big[3] = np.nan
    assert not P.all_finite(big)
    assert P.all_finite(np.zeros(0, np.float32))


def test_split_frames_errors():
    buf = P.join_frames(commit_frames())
    with pytest.raises(P.ProtocolError, match="ends inside tensor"):
        P.split_frames(buf[:-1])
    with pytest.raises(P.ProtocolError, match="trailing"):
        P.split_frames(buf + b"x")
    with pytest.raises(P.ProtocolError, match="exceeds"):
        P.split_frames(buf, max_bytes=10)


def test_encode_rejects_out_of_range_fields():
    with pytest.raises(P.ProtocolError, match="worker_id"):
        P.encode(P.Message(P.MsgType.PULL, worker_id=-1))
    with pytest.raises(P.ProtocolError, match="dtype"):
        P.encode(P.Message(P.MsgType.SYNC, tensors=[np.array(["a"])]))


def test_template_and_secret_validation():
    assert P.default_max_bytes(TEMPLATE, slack=0) == 60 + (2 + 16) + (2 + 8) + 24 + 16
    with pytest.raises(ValueError, match="not supported"):
        P.template_from([((2,), np.complex64)])
    with pytest.raises(ValueError, match="at least 16"):
        P.check_secret(b"short")
    with pytest.raises(TypeError):
        P.check_secret("a string secret!!")
    assert len(P.new_secret()) == 32


def test_tune_malloc_only_for_large_messages():
    import platform

    assert P.tune_malloc(1 << 20) is False  # small messages: glibc's adaptive threshold suffices
    if platform.libc_ver()[0] == "glibc":
        assert P.tune_malloc(64 << 20) is True


# ----------------------------------------------------------------------------- known descriptors
def _outcome(frame, known=None):
    """What decode_header makes of ``frame``: its fields and descriptors, or the error."""
    try:
        h = P.decode_header(frame, known)
    except P.ProtocolError as e:
        return ("error", e.kind, str(e))
    return ("ok", h.type, h.worker_id, h.seq, h.clock, h.token,
            [(tuple(s), np.dtype(dt)) for s, dt in h.descriptors])


def test_known_descriptors_take_the_template_for_its_exact_header():
    known = P.KnownDescriptors([TEMPLATE])
    h = P.decode_header(commit_frames()[0], known)
    assert h.descriptors is TEMPLATE  # no per-descriptor parsing: decode skips the comparison
    msg = P.decode(commit_frames(), TEMPLATE, header=h, require_finite=True)
    for got, want in zip(msg.tensors, good_tensors()):
        np.testing.assert_array_equal(got, want)


def test_known_descriptors_change_no_verdict_on_other_headers():
    """Every mutation of a header (descriptor bytes, tensor count, length) gets the same
    descriptors or the same error with and without the known template."""
    known = P.KnownDescriptors([TEMPLATE])
    base = bytearray(commit_frames()[0])
    frames = [bytes(base), bytes(base[:-1]), bytes(base) + b"\0",
              P.encode(P.Message(P.MsgType.COMMIT, tensors=[np.zeros((2, 3), np.float32),
                                                            np.zeros(4, np.float32)]))[0],
              P.encode(P.Message(P.MsgType.COMMIT, tensors=[np.zeros((3, 2), np.float64),
                                                            np.zeros(4, np.float32)]))[0],
              P.encode(P.Message(P.MsgType.COMMIT, tensors=good_tensors()[:1]))[0]]
    for n in (1, 3, P.MAX_TENSORS + 1):  # the template's descriptor bytes, another count
        h = bytearray(base)
        struct.pack_into("<I", h, 12, n)
        frames.append(bytes(h))
    rng = np.random.default_rng(0)
    for _ in range(300):  # random byte flips in the descriptor part
        h = bytearray(base)
        for pos in rng.integers(P.FIXED_HEADER_BYTES, len(h), size=rng.integers(1, 3)):
            h[pos] = int(rng.integers(0, 256))
        frames.append(bytes(h))
    for f in frames:
        assert _outcome(f, known) == _outcome(f), f


def test_decode_keeps_the_received_frames():
    frames = commit_frames()
    msg = P.decode(frames, TEMPLATE)
    assert msg.frames == frames[1:] and all(a is b for a, b in zip(msg.frames, frames[1:]))
    assert P.Message(P.MsgType.PULL).frames == []


def test_encode_normalises_byte_order_and_layout():
    be = np.arange(6, dtype=">f4").reshape(3, 2)
    frames = P.encode(P.Message(P.MsgType.SYNC, tensors=[be, np.arange(8, dtype=np.float32)[::2]]))
    assert frames[1].dtype == np.dtype("<f4") and frames[2].flags.c_contiguous
    msg = P.decode([bytes(frames[0])] + [f.tobytes() for f in frames[1:]], TEMPLATE)
    np.testing.assert_array_equal(msg.tensors[0], be)
    np.testing.assert_array_equal(msg.tensors[1], [0, 2, 4, 6])
