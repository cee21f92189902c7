from hisparse.cli import main

main()
