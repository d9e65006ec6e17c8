import sys

from rsi_client.cli import main

sys.exit(main())
