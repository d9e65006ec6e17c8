"""Run in a LeRobot interpreter when `make lerobot-env` builds it: the release, the fields each policy type's config
class takes, and the processor steps it registers (the only ones a checkpoint's processor files may name), as JSON on
standard output (written beside the interpreter as
rsi-lerobot-fields.json). A checkpoint's config.json is loaded by the oldest installed release that knows every one
of its fields: the release it was saved with (evaluator/policies/lerobot_releases.py).

    .venv-lerobot/bin/python evaluator/policies/lerobot_fields.py > .venv-lerobot/rsi-lerobot-fields.json
"""

import dataclasses
import json

import lerobot
import lerobot.policies
from lerobot.configs.policies import PreTrainedConfig
from lerobot.processor import ProcessorStepRegistry


def main() -> None:
    configs = {
        name: sorted(["type", *(field.name for field in dataclasses.fields(PreTrainedConfig.get_choice_class(name)))])
        for name in sorted(PreTrainedConfig.get_known_choices())
    }
    steps = sorted(ProcessorStepRegistry.list())
    print(json.dumps({"lerobot": lerobot.__version__, "configs": configs, "processor_steps": steps}, indent=1))


if __name__ == "__main__":
    main()
