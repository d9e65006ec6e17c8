"""The RSI client: the HTTP API (/api/v1/) from Python, with the standard library only.

    from rsi_client import Client
    rsi = Client("https://rsi.example.org", token="rsi_...")  # or RSI_URL and RSI_TOKEN in the environment
    campaign = rsi.evaluate(benchmark="fetch", tasks="all", repeats=3, policy="openpi+ws://gpu7:8000")
    print(campaign["report"]["overall"]["success_rate"])

The command line is `rsi` (rsi_client/cli.py).
"""

from rsi_client.client import ApiError, Client, WaitTimedOut

__all__ = ["ApiError", "Client", "WaitTimedOut"]
