"""Media in a run: a turn's attachments (images, voice notes) through the media
service, and the ``image`` tool."""
