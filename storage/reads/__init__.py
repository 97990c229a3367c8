"""What people read: the delivery log and its search, a payment's story, finance, vitals, and
the console's own book (its audit log, refusals and reviews).

The :class:`~payhooks.storage.Ledger` delegates to these modules, so inside
:mod:`payhooks.storage` a module imports a reads module by its own path, never this package.
"""

from __future__ import annotations
