"""File names as values: a word and a common extension (``design-spec.pdf``).

The request reader takes a file name for a value, like an address or an id
(:data:`~soloflow_core.store.fulltext.VALUE_PATTERN`): ``design`` and ``spec`` name the
thing, not what is asked. The generaliser learns a file name's shape with the same list
(:func:`~soloflow_core.generalize.shapes.learn_shape`).
"""

from __future__ import annotations

__all__ = ["FILE_EXTENSIONS"]

FILE_EXTENSIONS = tuple(
    (
        "7z avi bmp csv doc docx eml gif gz htm html ics ipynb jpeg jpg js json key log md "
        "mov mp3 mp4 msg odp ods odt pdf png ppt pptx py rar rtf sql svg tar tgz tiff ts tsv "
        "txt vcf wav webp xls xlsx xml yaml yml zip"
    ).split()
)
"""The extensions that make a word a file name."""
