"""Typed errors. Every user-facing failure is one of these, with a message that names the
argument (or config file and key) and the allowed values."""


class HisparseError(Exception):
    """Base class of every error hisparse raises on purpose."""


class InputError(HisparseError, ValueError):
    """A tensor or scalar argument of an op is invalid (dtype, shape, device, range, contract)."""


class ConfigError(HisparseError, ValueError):
    """A sweep config (YAML) is invalid: the message names the file, the key and what is allowed."""


class KernelUnavailable(HisparseError, RuntimeError):
    """A CUDA kernel cannot be built or loaded here (no nvcc, no GPU, HISPARSE_NO_JIT and no prebuilt .so)."""


class BuildError(KernelUnavailable):
    """nvcc (or the linker) failed; the message carries the compiler's own output."""


class ResultFormatError(HisparseError, ValueError):
    """A result file cannot be read: unknown schema version, missing field, mismatched metadata."""


class OutputPathError(HisparseError, OSError):
    """A path the tool was told to write cannot or must not be written (read-only folder, a path under
    a file, a directory or a device, an existing file without --force, one of the command's own
    inputs). An OSError too, so callers that tolerate a failed write still do."""


class HostAllocationError(HisparseError, RuntimeError):
    """The OS or the driver cannot give host memory of a kind (huge pages not reserved, one NUMA node, no
    CUDA): the message says which and why; a case that needs it is skipped with that reason."""
