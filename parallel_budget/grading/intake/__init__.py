"""Stage 1, intake: an upload becomes one submission folder per student.

* :mod:`.archive`          reading zip uploads within byte and member caps
* :mod:`.owners`           whose is each file: the collection plan, decided before anything is written
* :mod:`.zipnames`         nbgrader ``zip_collect``'s collector, reading ids only at the top of an LMS export
* :mod:`.collect`          carrying out the plan into ``autograde/submitted`` (quarantine, digests)
* :mod:`.student_numbers`  per-student numbers: the setting, the release's extra cells, expected values
* :mod:`.synthetic`        a class of students made from the release, for tests and benchmarks
"""
