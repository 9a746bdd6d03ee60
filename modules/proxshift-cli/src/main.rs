fn main() {
    std::process::exit(proxshift_cli::main_with(std::env::args_os()));
}
