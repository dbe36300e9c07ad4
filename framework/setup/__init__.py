"""The set-up's one-off work: the local JVM's file system and class archive.
"""
