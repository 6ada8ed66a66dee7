from elastic.manager.service import main

main()
