"""Each owner's working set in memory: its memories with their keyword postings and filter
columns, kept current with the store through a change sequence, searched without SQL.

`owner.OwnerSet` is one owner's set and the arithmetic of a search over it;
`registry.WorkingSets` holds the process's sets under a memory budget and keeps them
current through a store's `registry.StorePort`. Nothing here knows SQL: the store adapts
itself to the port (memsvc/storage/working_set_port.py).
"""

from memsvc.working_set.owner import OwnerSet
from memsvc.working_set.registry import StorePort, WorkingSets

__all__ = ["OwnerSet", "StorePort", "WorkingSets"]
