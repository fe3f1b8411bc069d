"""Dynamic Resource Allocation's device selection: the CEL selectors and the allocator."""
