"""plumb's example Filter plugin: MaintenanceWindow keeps pods off nodes during their
maintenance windows (the plugin is in ``maintenance``, the annotation's reading in
``intervals``)."""
