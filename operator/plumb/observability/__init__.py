"""What plumb tells operators about itself: log format now; metrics and traces as they land."""
