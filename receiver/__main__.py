"""``python -m payhooks.receiver``: the ``payhooks`` console script."""

from payhooks.receiver.console import main

main()
