"""The SIMPLE humanoid tasks of the named double checkout (tests/doubles/simple_checkout.py) and a policy
that its predicates reward; the fixtures `simple_double` and `forward` (tests/conftest.py) install them."""

from evaluator.policies.base import Policy, PolicyReply

BEND_PICK = "G1WholebodyBendPickMP-v0"
INSTRUCTION = "bend to pick up the cracker box"
FAUCET = "G1WholebodyOpenFaucetTeleop-v0"
BETWEEN_TABLES = "G1WholebodyLocomotionPickBetweenTablesTeleop-v0"
# the native language of this task starts with a space (upstream_simple_facts.md §1)
BETWEEN_TABLES_INSTRUCTION = " pick up the apple from table1,locomotion to table2,and place  on table2."
TASKS = {
    BEND_PICK: (INSTRUCTION, "amo"),
    FAUCET: ("move forward to the faucet and open it", "sonic"),
    BETWEEN_TABLES: (BETWEEN_TABLES_INSTRUCTION, "sonic"),
}


class Forward(Policy):
    """Five controls per call: walk forward (vx 1.0) with the left shoulder pitch target at 1e3 and the right
    thumb closed (1.0): what the double's AMO and faucet predicates reward."""

    def start_episode(self, start):
        self.seen = []

    def act(self, message):
        self.seen.append((message.instruction, message.rgb.shape, message.rgb.dtype, dict(message.sensors)))
        action = [0.0] * 36
        action[7], action[14], action[31], action[32] = 1.0, 1e3, 0.75, 1.0
        return PolicyReply({"actions": [action] * 5})
