"""Filter, score and select over plain arrays: purely computational, no I/O and no objects."""
