"""``python -m payhooks.receiver``: the ``payhooks`` console script."""

from payhooks.receiver.script import main

main()
