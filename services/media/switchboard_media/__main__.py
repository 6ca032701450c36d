from switchboard.host import module_main

module_main("media")
