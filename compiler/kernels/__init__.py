"""Layer 3, kernels: the kernel families and the helpers they share.

A family (``family.KernelFamily``) says whether it takes a dispatch (or refuses with a reason),
configures itself, plans and emits. The pipeline reaches families only through ``registry``.
A family imports ``core``, ``target`` and ``kernels.common``; never another family, the pipeline
or the driver."""
