"""The media service: attachments sniffed, checked, stored with a TTL; images resized, audio
transcribed."""
