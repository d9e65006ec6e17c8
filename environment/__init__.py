"""Native runtimes: task catalogs (data), the worker protocol and one worker per benchmark family."""
