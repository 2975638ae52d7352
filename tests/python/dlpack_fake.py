"""A DLPack producer over a NumPy array that reports another device (pinned CPU memory, as
PyTorch reports a pinned tensor, or a GPU), for testing out= without CUDA: the bytes stay the
NumPy array's, so a test can see what was written."""
import ctypes

import numpy as np


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST = 1, 2, 3
_CODES = {"i": 0, "u": 1, "f": 2}


class FakeDevice:
    def __init__(self, array, device_type):
        assert array.flags.c_contiguous
        self.array, self.device_type = array, device_type
        self._shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        self._managed = []  # every capsule's struct stays alive as long as this object

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, **kwargs):
        m = _Managed()
        t = m.dl_tensor
        t.data = self.array.ctypes.data
        t.device = _Device(self.device_type, 0)
        t.ndim = self.array.ndim
        t.dtype = _DType(_CODES[self.array.dtype.kind], self.array.dtype.itemsize * 8, 1)
        t.shape = self._shape
        t.strides = None
        t.byte_offset = 0
        m.deleter = None
        self._managed.append(m)
        return _capsule_new(ctypes.addressof(m), b"dltensor", None)


def pinned(array):
    return FakeDevice(array, KDL_CUDA_HOST)


def gpu(array):
    return FakeDevice(array, KDL_CUDA)
