"""plumb's example Score plugins: AcceleratorPacking packs accelerator pods onto the nodes
whose accelerators are the most in use (``packing``), PriceLabel prefers cheaper nodes by a
price label (``prices``)."""
