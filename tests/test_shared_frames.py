"""Frames handed to a model host through shared memory (issue 54, point 5: "The `lerobot:` process hop: 3.8–5.8 ms a
call ... Goal ≤ 1 ms"): a hosted policy writes each frame into a file of shared memory its host maps once, on real
TorchScript hosts. The rule kept: the host answers each call from that call's own frame, exactly as from the frame
sent inline, and a host never reads a file its caller did not make for it ("Everything from outside is hostile until
validated")."""

import json
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from websockets.sync.client import connect

from evaluator.policies import hosted, msgpack_numpy
from evaluator.policies.base import EpisodeStart, MailboxMessage
from evaluator.policies.model_hosts import stop_hosts
from evaluator.policies.shared_frames import FOLDER, MARKER, FrameWriter
from evaluator.policies.torchscript import TorchScriptPolicy
from evaluator.protocol.actions import FETCH_ACTION
from tests.parts import require_module

torch = require_module("torch")


@pytest.fixture
def brightness_module(tmp_path) -> Path:
    """A TorchScript module whose every action is the frame's mean red, green and blue, then its first pixel's red:
    each call's answer says which frame the host read."""

    class Brightness(torch.nn.Module):
        def forward(self, image: torch.Tensor) -> torch.Tensor:
            means = image.float().mean(dim=(0, 1)) / 255.0
            first = image[0, 0, 0:1].float() / 255.0
            return torch.cat([means, first]).repeat(5, 1)

    path = tmp_path / "brightness.pt"
    torch.jit.script(Brightness()).save(str(path))
    stop_hosts()
    yield path
    stop_hosts()


def frames(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for _ in range(count)]


def expected(module: Path, frame: np.ndarray) -> np.ndarray:
    """The module's answer to `frame`, run here."""
    return torch.jit.load(str(module))(torch.from_numpy(frame.copy())).double().numpy()


def episode(path: Path, pictures: list[np.ndarray], token: str = "a" * 32) -> tuple[list, TorchScriptPolicy]:
    policy = TorchScriptPolicy(str(path))
    policy.start_episode(EpisodeStart(token, "push", FETCH_ACTION.describe(), {}, ("observation",)))
    answers = []
    try:
        for picture in pictures:
            message = MailboxMessage(token=token, instruction="push", rgb=picture, counters={})
            answers.append(np.asarray(policy.act(message).response["actions"]))
    finally:
        policy.end_episode()
    return answers, policy


def our_files() -> set[str]:
    return {path.name for path in FOLDER.glob("rsi-frames-*")}


def test_each_call_is_answered_from_its_own_frame_in_shared_memory_as_from_the_frame_sent_inline(
    brightness_module, monkeypatch
):
    pictures = frames(4)
    shared, _ = episode(brightness_module, pictures)
    monkeypatch.setattr(hosted, "FrameWriter", lambda: FrameWriter(Path("/no/shared/memory/here")))
    inline, policy = episode(brightness_module, pictures)
    for picture, through_memory, through_message in zip(pictures, shared, inline, strict=True):
        assert np.array_equal(through_memory, expected(brightness_module, picture))
        assert np.array_equal(through_memory, through_message)


def test_the_shared_file_is_gone_once_the_host_answered_the_first_call_and_later_calls_still_read_theirs(
    brightness_module,
):
    before = our_files()
    policy = TorchScriptPolicy(str(brightness_module))
    policy.start_episode(EpisodeStart("b" * 32, "push", FETCH_ACTION.describe(), {}, ("observation",)))
    try:
        first, second = frames(2)
        policy.act(MailboxMessage(token="b" * 32, instruction="push", rgb=first, counters={}))
        assert policy.frames.path is not None and not policy.frames.path.exists()
        assert our_files() == before
        reply = policy.act(MailboxMessage(token="b" * 32, instruction="push", rgb=second, counters={}))
        assert np.array_equal(reply.response["actions"], expected(brightness_module, second))
    finally:
        policy.end_episode()
    assert our_files() == before


def test_a_frame_larger_than_the_first_or_not_a_uint8_picture_travels_inline():
    writer = FrameWriter()
    try:
        assert writer.place(np.zeros((4, 4, 3), np.uint8)) == {MARKER: writer.path.name, "shape": [4, 4, 3]}
        assert writer.place(np.zeros((8, 8, 3), np.uint8)) is None
        assert writer.place(np.zeros((4, 4, 3), np.float32)) is None
        assert writer.place(np.zeros((2, 2, 3), np.uint8)) == {MARKER: writer.path.name, "shape": [2, 2, 3]}
    finally:
        writer.close()
    assert not writer.path.exists()


@contextmanager
def raw_host(path: Path):
    """A connection of our own to the machine's running host for `path`, its metadata read."""
    policy = TorchScriptPolicy(str(path))
    policy.start_episode(EpisodeStart("c" * 32, "push", FETCH_ACTION.describe(), {}, ("observation",)))
    policy.end_episode()
    (record,) = [json.loads(p.read_text()) for p in Path(os.environ["RSI_MODEL_HOST_DIR"]).glob("*.json")]
    address, secret = f"ws://127.0.0.1:{record['port']}", {"Authorization": f"Bearer {record['secret']}"}
    with connect(address, additional_headers=secret, proxy=None, max_size=None) as socket:
        assert msgpack_numpy.unpack(socket.recv(timeout=30))["shared_frames"] is True
        yield socket


def ask(socket, image) -> str | dict:
    socket.send(msgpack_numpy.pack({"observation/image": image, "prompt": "push"}))
    answer = socket.recv(timeout=30)
    return answer if isinstance(answer, str) else msgpack_numpy.unpack(answer)


def test_a_host_reads_only_a_regular_file_of_ours_named_as_ours_and_large_enough_for_its_frame(
    brightness_module, tmp_path
):
    made = [FOLDER / f"rsi-frames-{'1' * 32}", FOLDER / f"rsi-frames-{'2' * 32}", FOLDER / f"rsi-frames-{'3' * 32}"]
    small, linked, good = made
    small.write_bytes(b"\0" * 12)
    (tmp_path / "elsewhere").write_bytes(b"\0" * 48)
    linked.symlink_to(tmp_path / "elsewhere")
    picture = frames(1)[0][:4, :4]
    good.write_bytes(picture.tobytes())
    try:
        with raw_host(brightness_module) as socket:
            refused = {
                "../../etc/passwd": "not one RSI makes",
                f"rsi-frames-{'9' * 32}": "cannot be opened",
                linked.name: "cannot be opened",
                small.name: "larger than its file",
            }
            for name, why in refused.items():
                assert why in ask(socket, {MARKER: name, "shape": [4, 4, 3]})
            assert "three positive whole numbers" in ask(socket, {MARKER: good.name, "shape": [4, -4, 3]})
        with raw_host(brightness_module) as socket:
            answer = ask(socket, {MARKER: good.name, "shape": [4, 4, 3]})
            assert np.array_equal(answer["actions"], expected(brightness_module, picture))
            assert "one file" in ask(socket, {MARKER: small.name, "shape": [1, 1, 3]})
    finally:
        for path in made:
            path.unlink(missing_ok=True)
