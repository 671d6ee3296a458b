"""torch's zip container of ``torch.save`` as objects: ``PyTorchFileReader`` and ``PyTorchFileWriter``
(torch.PyTorchFileReader/Writer, the classes torch's own serialization and torch.package write with).

A container is a zip archive of uncompressed records under one folder, the *archive name* (``archive``
for a buffer, the file's stem for a path); each record's data starts at a multiple of
``storage_alignment`` (64) bytes in the file, so a reader can map storages in place; closing writes
torch's ``version`` (3), ``byteorder`` and ``.data/serialization_id`` records. Python's zipfile does
the zip work; what is torch's here is the layout (the padding in each local header's extra field, the
fixed records) and the methods' names and errors. ``tritensor.load`` reads the same layout
(``torch_files.py``).
"""
from __future__ import annotations

import os
import struct
import zipfile

import numpy as np

from ..core.factories import tensor
from ..runtime import dtype as dt

__all__ = ["PyTorchFileReader", "PyTorchFileWriter"]

_ALIGN_TAG = 0x4246  # "FB": the extra field torch's writer pads local headers with
_LOCAL_HEADER = 30
_VERSION = 3  # what torch 2.13 writes


def _corrupt(name: str) -> RuntimeError:
    return RuntimeError(f"PytorchStreamReader failed locating file {name}: file not found. This is an internal "
                        "miniz error. If you are seeing this error, there is a high likelihood that your checkpoint "
                        "file is corrupted. This can happen if the checkpoint was not saved properly, was "
                        "transferred incorrectly, or the file was modified after saving.")


class PyTorchFileReader:
    """``PyTorchFileReader(file_name_or_buffer)``: the records of a torch zip container, by name (without
    the archive folder)."""

    def __init__(self, source):
        if isinstance(source, (str, os.PathLike)):
            self._file = open(source, "rb")
        elif hasattr(source, "read") and hasattr(source, "seek"):
            self._file = source
        else:
            raise TypeError(f"PyTorchFileReader(): expected a file name or a buffer with read/seek, got "
                            f"{type(source).__name__}")
        try:
            self._zip = zipfile.ZipFile(self._file)
        except zipfile.BadZipFile:
            raise RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central directory") \
                from None
        names = self._zip.namelist()
        if not names:
            raise RuntimeError("PytorchStreamReader failed reading zip archive: the archive has no records")
        self._prefix = names[0].split("/", 1)[0] + "/"
        self._infos = {i.filename[len(self._prefix):]: i for i in self._zip.infolist()
                       if i.filename.startswith(self._prefix)}

    def _info(self, name: str) -> zipfile.ZipInfo:
        info = self._infos.get(name)
        if info is None:
            raise _corrupt(name)
        return info

    def get_all_records(self) -> list:
        """The record names, in the archive's order."""
        return list(self._infos)

    def has_record(self, name: str) -> bool:
        """Whether the archive holds a record of that name."""
        return name in self._infos

    def get_record(self, name: str) -> bytes:
        """A record's bytes."""
        return self._zip.read(self._info(name))

    def get_record_size(self, name: str) -> int:
        """A record's size in bytes."""
        return self._info(name).file_size

    def get_record_header_offset(self, name: str) -> int:
        """Where the record's local header starts in the file."""
        return self._info(name).header_offset

    def get_record_offset(self, name: str) -> int:
        """Where the record's data starts in the file (past its local header, name and extra field)."""
        info = self._info(name)
        self._file.seek(info.header_offset)
        header = self._file.read(_LOCAL_HEADER)
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        return info.header_offset + _LOCAL_HEADER + name_len + extra_len

    def get_record_offset_no_read(self, zipfile_header_offset: int, filename: str, size: int,
                                  storage_alignment: int) -> int:
        """Where a record written by torch's writer starts, computed from its header offset without reading
        it: the header, the archive-qualified name, and the padding up to ``storage_alignment``."""
        start = zipfile_header_offset + _LOCAL_HEADER + len(self._prefix + filename)
        start += 4  # the padding field's tag and length
        return start + (-start) % storage_alignment

    def get_storage_from_record(self, name: str, numel: int, dtype):
        """The record as a 1-D CPU tensor of ``numel`` elements of ``dtype`` (a copy of its bytes)."""
        if not isinstance(dtype, dt.dtype):
            raise TypeError(f"get_storage_from_record(): argument 'dtype' must be torch.dtype, not "
                            f"{type(dtype).__name__}")
        data = self.get_record(name)
        expected = numel * dtype.itemsize
        if len(data) != expected:
            raise RuntimeError(f"record size ({len(data)} bytes) does not match expected size ({expected} bytes = "
                               f"{numel} elements * {dtype.itemsize} bytes/element) for dtype {dtype.type_name}")
        return tensor(np.frombuffer(data, dtype=dtype.np).copy(), device="cpu")

    def serialization_id(self) -> str:
        """The id the writer stored in ``.data/serialization_id`` ("" when the archive has none)."""
        if not self.has_record(".data/serialization_id"):
            return ""
        return self.get_record(".data/serialization_id").decode()


class PyTorchFileWriter:
    """``PyTorchFileWriter(file_name_or_buffer, compute_crc32=True, storage_alignment=64)``: writes records
    into a torch zip container; ``write_end_of_file()`` adds torch's fixed records and closes it."""

    def __init__(self, target, compute_crc32: bool = True, storage_alignment: int = 64):
        if isinstance(target, (str, os.PathLike)):
            self._file = open(target, "wb")
            self._owned = True
            self._archive = os.path.splitext(os.path.basename(os.fspath(target)))[0] or "archive"
        elif hasattr(target, "write"):
            self._file, self._owned, self._archive = target, False, "archive"
        else:
            raise TypeError(f"PyTorchFileWriter(): expected a file name or a writable buffer, got "
                            f"{type(target).__name__}")
        if not isinstance(storage_alignment, int) or storage_alignment < 1:
            raise ValueError(f"PyTorchFileWriter(): storage_alignment must be a positive int, got {storage_alignment!r}")
        self._align = storage_alignment
        self._crc = bool(compute_crc32)
        self._zip = zipfile.ZipFile(self._file, "w", zipfile.ZIP_STORED)
        self._written: set = set()
        self._version = _VERSION
        self._id = "".join(str(b) for b in os.urandom(16))[:40]
        self._closed = False

    def _check_open(self):
        if self._closed:
            raise RuntimeError("PytorchStreamWriter: the archive was already finalized (write_end_of_file)")

    def archive_name(self) -> str:
        """The folder every record sits in inside the zip: the file's name without its extension, or
        ``archive`` for a stream, as torch names it."""
        return self._archive

    def serialization_id(self) -> str:
        """Empty until ``write_end_of_file`` stores it, as torch's."""
        return self._id if self._closed else ""

    def set_min_version(self, version: int) -> None:
        """Raise the ``version`` record written at the end to at least ``version``."""
        self._version = max(self._version, int(version))

    def get_all_written_records(self) -> set:
        """The names of the records written so far."""
        return set(self._written)

    def write_record(self, name: str, data, size: int) -> None:
        """Write ``size`` bytes of ``data`` (bytes-like) as record ``name``, its data aligned in the file."""
        self._check_open()
        if not isinstance(name, str):
            raise TypeError(f"write_record(): argument 'name' must be str, not {type(name).__name__}")
        full = f"{self._archive}/{name}"
        if name in self._written:
            raise RuntimeError(f"Tried to serialize file twice: {full}")
        payload = bytes(memoryview(data).cast("B")[:size])
        if len(payload) != size:
            raise RuntimeError(f"write_record(): size {size} is larger than the data ({len(payload)} bytes)")
        info = zipfile.ZipInfo(full, date_time=(1980, 1, 1, 0, 0, 0))  # torch's writer stores no time either
        info.compress_type = zipfile.ZIP_STORED
        start = self._zip.fp.tell()
        data_at = start + _LOCAL_HEADER + len(full.encode()) + 4
        pad = (-data_at) % self._align
        info.extra = struct.pack("<HH", _ALIGN_TAG, pad) + b"Z" * pad
        self._zip.writestr(info, payload)
        self._written.add(name)

    def write_record_metadata(self, name: str, size: int) -> None:
        """Reserve record ``name`` of ``size`` zero bytes (torch writes the data later in place)."""
        self.write_record(name, bytes(size), size)

    def write_end_of_file(self) -> None:
        """Write ``version``, ``byteorder`` and ``.data/serialization_id``, then the zip's central
        directory."""
        if self._closed:
            return
        for name, data in (("version", f"{self._version}\n".encode()), ("byteorder", b"little")):
            if name not in self._written:
                self.write_record(name, data, len(data))
        ident = self._id.encode()
        self.write_record(".data/serialization_id", ident, len(ident))
        self._zip.close()
        self._closed = True
        if self._owned:
            self._file.close()

