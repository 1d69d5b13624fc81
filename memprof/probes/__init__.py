"""The outside world, read: serve command lines, start-up logs, and the GPUs of this host
(NVML, amdsmi). Everything here turns what another program wrote into memprof's own objects (a
``Deployment``, figures in bytes) and fails with one ``error:`` line on what it cannot read.
"""
