"""The evidence archive: every page a report cites, kept as WARC 1.1 records (docs/archive.md).

``capture`` sees a fetch's hops as they happen, ``records`` turns them into WARC records with
warcio, ``writer`` stores them off the fetch's path behind the ``store`` interface (``directory``,
``s3``), ``index`` remembers which records each report cites, ``export`` writes a report's records
as one file, and retention (in ``writer``) deletes whole old files.
"""
