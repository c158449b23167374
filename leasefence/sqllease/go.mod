module github.com/leasefence/lab/leasefence/sqllease

go 1.26.0

require github.com/leasefence/lab/leasefence v0.0.0-00010101000000-000000000000

replace github.com/leasefence/lab/leasefence => ../
