"""What the gateway's web pages share: the third-party browser libraries, vendored from npm
(:mod:`.vendor_lock`, ``python -m switchboard_gateway.web``) and served as files of this package
(:mod:`.assets`), never from a CDN."""
