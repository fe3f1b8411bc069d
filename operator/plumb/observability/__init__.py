"""What plumb tells operators about itself: the log format, trace records and their volume
limits, and the Prometheus metrics. The lowest layer: it imports nothing of plumb's."""
