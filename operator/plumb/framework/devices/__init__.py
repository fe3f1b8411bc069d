"""Dynamic Resource Allocation's device selection: CEL selectors and the structured allocator."""
