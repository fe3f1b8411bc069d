"""Filter, score and select over plain arrays: purely computational, no I/O and no objects.

(``benchmarking``, the kernel micro-benchmark, is the exception: ``plumb bench`` runs it as a
program of its own, which prints its figures; nothing on the scheduler's path imports it.)"""
