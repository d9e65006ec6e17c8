"""The views, one module per page group: campaigns (and launch), attempts (search and exports), review, live,
compare and sim-to-real; common holds what several share."""
