"""One module per plugin: its NAME, its failure reasons as constants, its weight and arguments."""
