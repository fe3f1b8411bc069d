// The pod sandbox's "pause" process for plumb's local node; no dependencies, built static.
module plumb.dev/hack/images/pause

go 1.24.0
