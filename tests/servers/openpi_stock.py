"""An openpi policy server the way openpi serves one (openpi/serving/websocket_policy_server.py,
read, not copied): on connect it sends its metadata, then answers each observation with the
policy's output dict plus "server_timing". Every message goes through openpi-client's own
msgpack_numpy codec, so what RSI sends must decode as a stock openpi server decodes it.

The policy behind it is a stand-in for a stock LIBERO or DROID policy: it reads the inputs that
openpi's LiberoInputs / DroidInputs transforms read, fails like openpi when one is missing (a text
frame with the error, then close 1011), and answers a zero chunk of `action_horizon` actions. Each
observation's keys, shapes, dtypes and whether it is all zeros are logged as JSON lines.

Run in .venv-openpi: python openpi_stock.py PROFILE ACTION_DIM PORT_FILE LOG_FILE
"""

import json
import sys
import traceback

import numpy as np
from openpi_client import msgpack_numpy
from websockets.sync.server import serve

INPUTS = {
    "libero": ("observation/image", "observation/wrist_image", "observation/state", "prompt"),
    "droid": (
        "observation/exterior_image_1_left",
        "observation/wrist_image_left",
        "observation/joint_position",
        "observation/gripper_position",
        "prompt",
    ),
}
ACTION_HORIZON = 10


def main(profile: str, action_dim: int, port_file: str, log_file: str) -> None:
    log = open(log_file, "a")  # noqa: SIM115  (held for the server's life)

    def handler(connection):
        connection.send(msgpack_numpy.packb({"policy": f"stock {profile}", "action_horizon": ACTION_HORIZON}))
        for message in connection:
            try:
                observation = msgpack_numpy.unpackb(message)
                seen = {}
                for key in INPUTS[profile]:
                    value = observation[key]  # a KeyError, as openpi's input transforms raise
                    if isinstance(value, np.ndarray):
                        seen[key] = {"shape": list(value.shape), "dtype": value.dtype.str, "zero": not value.any()}
                    else:
                        seen[key] = {"type": type(value).__name__}
                seen["extra"] = sorted(set(observation) - set(INPUTS[profile]))
                log.write(json.dumps(seen) + "\n")
                log.flush()
                reply = {"actions": np.zeros((ACTION_HORIZON, action_dim)), "policy_timing": {"infer_ms": 1.0}}
                reply["server_timing"] = {"infer_ms": 1.5}
                connection.send(msgpack_numpy.packb(reply))
            except Exception:
                connection.send(traceback.format_exc())
                connection.close(1011, "Internal server error")
                return

    with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
        with open(port_file, "w") as handle:
            handle.write(str(server.socket.getsockname()[1]))
        server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
