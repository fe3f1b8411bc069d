"""The compact records plumb keeps of API objects (pods, nodes, their specs) and the stable
hashes that name them; what the cache and the queue hold."""
