"""The ground floor of memprof: the error hierarchy (with its exit codes) and the size units.

Every other package imports these and nothing here imports any of them, so the pure allocator
simulator (``memprof.alloc``) can sit below the estimator (``memprof.core``) and still raise the
same errors and format sizes the same way.
"""
