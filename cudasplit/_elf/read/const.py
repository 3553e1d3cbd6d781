"""ELF numbers: dynamic tags, segment and section types, and the struct layouts of the headers.

Only the values the reader and the writer use; names follow the gABI and ``<elf.h>``.
"""

from __future__ import annotations

ELF_MAGIC = b"\x7fELF"

# Dynamic tags
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ = 0, 1, 4, 5, 6, 10
DT_SONAME, DT_RPATH, DT_RUNPATH = 14, 15, 29
DT_GNU_HASH, DT_VERSYM = 0x6FFFFEF5, 0x6FFFFFF0
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
# Every tag whose value is an offset into .dynstr (gABI + GNU extensions).
STRING_TAGS = frozenset(
    {DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, 0x7FFFFFFD, 0x7FFFFFFF, 0x6FFFFEFA, 0x6FFFFEFB,
     0x6FFFFEFC}
)
PATH_TAGS = (DT_RPATH, DT_RUNPATH)

PT_NULL, PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR = 0, 1, 2, 3, 4, 6
PT_GNU_PROPERTY = 0x6474E553
PF_R, PF_W = 4, 2
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_HASH, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = \
    1, 2, 3, 5, 6, 7, 8, 11
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = \
    0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
NT_GNU_BUILD_ID = 3
PAGE = 0x1000  # the smallest page size of the targets (x86_64, aarch64 4K, ppc64le 4K/64K)

MAX_NOTE_BYTES = 1 << 16  # notes bigger than this are not inspected (treated as build-id)

# Tags whose value is an address the loader dereferences: PLTGOT HASH STRTAB SYMTAB RELA INIT
# FINI REL JMPREL INIT_ARRAY FINI_ARRAY RELR GNU_HASH VERSYM VERDEF VERNEED
ADDRESS_TAGS = (3, 4, 5, 6, 7, 12, 13, 17, 23, 25, 26, 36, DT_GNU_HASH, DT_VERSYM, DT_VERDEF,
                DT_VERNEED)

# Struct layouts by ELF class (32 | 64), without the byte order.
EHDR_FORMAT = {32: "16sHHIIIIIHHHHHH", 64: "16sHHIQQQIHHHHHH"}
PHDR_FIELDS = ("p_type", "p_flags", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz",
               "p_align")
# Field (index into PHDR_FIELDS) at each stored position: ELF32 stores p_flags after p_memsz,
# ELF64 right after p_type (for alignment).
PHDR_FORMAT = {32: ("IIIIIIII", (0, 2, 3, 4, 5, 6, 1, 7)),
               64: ("IIQQQQQQ", (0, 1, 2, 3, 4, 5, 6, 7))}
SHDR_FORMAT = {32: "IIIIIIIIII", 64: "IIQQQQIIQQ"}
DYN_FORMAT = {32: "iI", 64: "qQ"}
