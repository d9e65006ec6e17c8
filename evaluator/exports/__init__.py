"""Evidence read back out: exact frames and byte ranges of stored files (media), LeRobot datasets (lerobot), and
replays of attempts with campaign checks (replay), and CSV no spreadsheet runs as a formula (spreadsheets).

It may import readiness, running, records, native and the protocol core; starting a replay on the executor is
execution's.
"""
